"""The host side of a run, shared by every engine: everything on the event loop's side of the
host↔runtime boundary.

Modules: ``host`` (:class:`~.host.HostedRun`, the run itself), ``serving`` (hook calls checked
and answered), ``scheduler`` (children's slots and workers), ``ledger`` (the open calls and their
answers), ``journal`` and ``journal_writer`` (a durable run's record and its commits), ``calls``
(the per-call log), ``budget``, ``stop``, ``outcome``, ``agent_options`` (the options of one
``agent()`` call), ``provider_options``, and ``control`` (cancel requests from the store). This
floor imports the core, the store and, of the script floor, only ``wire`` and ``limits``;
nothing is imported here.
"""
