"""The catalog of runs (`infermeter runs`): run and suite directories found under the directories given, indexed in
an in-memory DuckDB (a `runs` table, a `requests` view over the records in place), their groups of repeated runs in
time order, a metric's trend over those groups, and the check of the newest group against a baseline for CI.

Modules: `find` (the run directories and their suites), `entry` (one run as the catalog reads it), `columns` (run.json
and summary.json as typed table columns), `index` (the DuckDB catalog), `names` (the metric names), `groups` (runs
into groups and series), `evidence` (a group's value, its CI, and a change's test, by the comparison rules), `trend`
and `check`.
"""
