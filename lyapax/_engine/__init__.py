"""The engine every problem kind runs on.

- :mod:`~lyapax._engine.problem`: the problem protocol (``for_engine``) and
  the ODE/map problem;
- :mod:`~lyapax._engine.run`: run arguments, resume, one run and its result;
- :mod:`~lyapax._engine.benettin`: the Benettin/QR kernel (the jitted loop);
- :mod:`~lyapax._engine.qr`, :mod:`~lyapax._engine.stats`: re-orthonormalisation
  and error bars;
- :mod:`~lyapax._engine.tree`, :mod:`~lyapax._engine.validate`: pytree helpers
  and call-time argument checks.

Nothing here imports from the rest of lyapax.
"""
