"""The engine every problem kind runs on.

- :mod:`~lyapax._engine.abstract`: the declared interfaces (``AbstractStep``,
  ``AbstractProblem``, ``EngineView``) and the compatibility check
  ``as_step``;
- :mod:`~lyapax._engine.options`: run options, grouped and validated once;
- :mod:`~lyapax._engine.problem`: the ODE/map problem and the two call forms
  of the entry points;
- :mod:`~lyapax._engine.run`: run sizes, resume, one run and its result;
- :mod:`~lyapax._engine.benettin`: the Benettin/QR kernel (the jitted loop);
- :mod:`~lyapax._engine.qr`, :mod:`~lyapax._engine.stats`,
  :mod:`~lyapax._engine.summary`: re-orthonormalisation, error bars, results;
- :mod:`~lyapax._engine.precision`: the library's own products at
  ``Precision.HIGHEST``, random frames drawn once for every dtype;
- :mod:`~lyapax._engine.tree`, :mod:`~lyapax._engine.validate`,
  :mod:`~lyapax._engine.shapes`: pytree helpers, call-time argument checks,
  shape-annotated types;
- :mod:`~lyapax._engine._legacy`: the one place that recognises undeclared
  (duck-typed) problems, steps and couplings.

Nothing here imports from the rest of lyapax.
"""
