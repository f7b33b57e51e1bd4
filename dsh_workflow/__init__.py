"""dsh-workflow: run model-written JavaScript workflows in a sandboxed QuickJS engine."""
