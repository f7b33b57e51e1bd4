"""The script side of a run: what runs on the QuickJS side of the host↔runtime boundary.

Modules: ``wire`` (the shapes that cross between host and runtime), ``limits`` (the runtime's
limits as one value, and the one place its failures become workflow errors), ``prelude`` (loads
``runtime_js/`` and states the names its two files share) and ``thread`` (one QuickJS context
owned by one thread: the in-process :class:`~.wire.ScriptRuntime`). This floor imports only the
core and itself; the sandbox child imports it without pydantic, so nothing is imported here.
"""
