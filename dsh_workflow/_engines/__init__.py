"""Engine implementations behind the seam (private), in three floors.

* ``script/`` — the script side of a run: the shapes that cross to the runtime, the runtime's
  limits, the prelude (``runtime_js/``) and the in-process runtime thread. Imports only the core.
* ``host/`` — the host side of a run, shared by every engine: the run (``HostedRun``), hook
  serving, the scheduler, the ledger of open calls, the journal, budget, stop and outcome.
  Imports the core, the store and, of ``script/``, only ``wire`` and ``limits``.
* the engines on top — ``base`` (the lifecycle every engine shares), ``admission`` (the checks
  before a run exists), ``handle``, ``launcher``, ``quickjs`` (``QuickJSEngine``) and
  ``subprocess/`` (``SubprocessEngine``). Nothing below imports them.

``tests/unit/test_layers.py`` checks the floors, and that the package has no import circle.
"""
