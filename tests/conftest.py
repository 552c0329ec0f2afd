"""The suite checks the annotations of the public entry points (see
:mod:`shape_check`)."""

import shape_check

shape_check.install()
