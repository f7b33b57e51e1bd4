"""The ``dsh-workflow`` command line: a client of the public API (see docs/cli.md). It reaches
the engines only through ``dsh_workflow``'s names and what :class:`~dsh_workflow.WorkflowEngine`
declares; a command module (one whose ``register`` is in :data:`.main.COMMANDS`) imports no
other command module — what commands share lives in the modules below that register none
(``tests/unit/test_layers.py``).

- :mod:`.main` — argument parsing, the table of commands, exit codes, Ctrl-C;
- :mod:`.commands` — how a command registers (``register(commands)``, one way for all);
- :mod:`.run` — the ``run`` and ``check`` commands;
- :mod:`.stores` — ``--store`` and the one function every command finds its store with;
- :mod:`.records` — a recorded run read from the store (by id or prefix), for every command
  that reads one;
- :mod:`.saved` — ``--workflows`` and the saved workflows a run finds (``run NAME``);
- :mod:`.options` — the engine, limit, provider and agent options ``run`` and ``mcp`` share;
- :mod:`.mcp` — ``dsh-workflow mcp``, the workflow tool served over MCP (docs/mcp.md);
- :mod:`.progress` — live progress on stderr and the ``--events`` JSON-lines log, fed only by
  the engine's public events.
"""
