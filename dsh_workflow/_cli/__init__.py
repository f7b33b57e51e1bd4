"""The ``dsh-workflow`` command line: a client of the public API (see docs/cli.md).

- :mod:`.main` — argument parsing, the table of commands, exit codes, Ctrl-C;
- :mod:`.commands` — how a command registers (``register(commands)``, one way for all);
- :mod:`.run` — the ``run`` and ``check`` commands;
- :mod:`.stores` — ``--store`` and the one function every command finds its store with;
- :mod:`.options` — the engine, limit, provider and agent options ``run`` and ``mcp`` share;
- :mod:`.mcp` — ``dsh-workflow mcp``, the workflow tool served over MCP (docs/mcp.md);
- :mod:`.progress` — live progress on stderr and the ``--events`` JSON-lines log, fed only by
  the engine's public events.
"""
