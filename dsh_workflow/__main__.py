"""``python -m dsh_workflow``: the ``dsh-workflow`` command line."""

from dsh_workflow._cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
