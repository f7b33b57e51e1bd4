"""The host side of a run, shared by every engine: everything on the event loop's side of the
host↔runtime boundary.

Modules: ``host`` (:class:`~.host.HostedRun`, the run itself), ``serving`` (hook calls checked
and answered), ``scheduler`` (children's slots and workers), ``ledger`` (the open calls and their
answers), ``journal`` and ``journal_writer`` (a durable run's record and its commits), ``calls``
(the per-call log), ``budget``, ``stop``, ``outcome``, and ``control`` (cancel requests from
the store); an ``agent()`` call's options are parsed by the core's ``_agent_options`` and what a
run records of its provider is the core's ``_provider_options``. This
floor imports the core, the store and, of the script floor, only ``wire`` and ``limits``;
nothing is imported here.
"""
