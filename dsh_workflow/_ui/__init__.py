"""The run viewer (docs/viewer.md): a local web page of a run store, served by ``dsh-workflow ui``.

Layout: ``summary`` (what a page shows of a stored run, syntax highlighting, folding of big
blocks), ``counts`` (the counts so far of unfinished runs, kept between list refreshes),
``live`` (a run's events as server-sent events), ``auth`` (the token, cookie and Origin checks
in front of every route), ``app`` (the Starlette application: pages, stream, assets),
``beacon`` (the owner-only file beside a store that tells other commands a viewer serves it,
and its token), ``templates/`` and ``static/`` (the pages and their script and style).

Only ``beacon`` may be imported without the ``ui`` extra (Starlette, uvicorn, sse-starlette,
Jinja2, Pygments, plotly); the others need it.
"""
