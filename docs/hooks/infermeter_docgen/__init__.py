"""The documentation site's generated parts, made from the code at build time so they cannot drift from it: a page
per command (the CLI's command tree), the contracts' tables (the pydantic models and the records' Arrow schema), the
Python API (`infermeter.__all__`) and the tests' list (the suite registry).  `docs/hooks/infermeter_docs.py` hands
them to mkdocs; nothing here is written into docs/."""
