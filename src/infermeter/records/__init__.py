"""RequestRecord and the run directory (DESIGN.md contracts): run.json, records.parquet, summary.json.

Records are appended to an Arrow IPC journal as requests finish, 16 at a time after a send, or all waiting when a
record finishes 2 s after the last flush (RunWriter says why: a flush holds the event loop), so a run that is
interrupted keeps everything, and even a killed one keeps every request finished before the last flush.  Every
request is also written to a small ledger (`sent.ledger`, 24 bytes) the moment it is sent, so a run whose process
was killed still accounts for every request it sent: those without a record come back as "cancelled: outcome not
recorded".  Closing the run turns the journal into `records.parquet`;
reading a run directory whose run never closed recovers from the journal and the ledger.

A failed request's `error` is "<reason>: <detail>", the reason taken from a short vocabulary (`failure`), so that
summaries count failures by reason.  run.json's model, `RunInfo`, lives in infermeter.run_info (re-exported here);
summary.json's, `Summary`, in infermeter.metrics.summary_model (records writes it, never imports it).

This is the import path of the whole contract; its parts: `schema` (the record, its Arrow schema, the file names),
`writer` (RunWriter and the other writes), `reader` (the reads, a sealed run's a field at a time) and `clock`.
"""

from infermeter.records.clock import RunClock
from infermeter.records.reader import (
    RecordsFile,
    is_sealed,
    read_ledger,
    read_records,
    read_run_info,
    unrecorded,
)
from infermeter.records.schema import (
    JOURNAL,
    LATER_FIELDS,
    LEDGER,
    LEDGER_DTYPE,
    NOT_RECORDED,
    RECORDS,
    RUN_FILES,
    RUN_JSON,
    SCHEMA,
    STATUSES,
    SUMMARY,
    RequestRecord,
    Status,
    failure,
    failure_reason,
    records_to_table,
    table_to_records,
)
from infermeter.records.writer import (
    DISK_ERRNOS,
    ROW_GROUP,
    SEND_HOLD,
    RunWriter,
    claim_run_dir,
    claimed_run_dir,
    disk_trouble,
    holds_run,
    out_error,
    write_records,
    write_run_info,
    write_summary,
)
from infermeter.run_info import RunInfo

__all__ = [
    "DISK_ERRNOS",
    "JOURNAL",
    "LATER_FIELDS",
    "LEDGER",
    "LEDGER_DTYPE",
    "NOT_RECORDED",
    "RECORDS",
    "ROW_GROUP",
    "RUN_FILES",
    "RUN_JSON",
    "SCHEMA",
    "SEND_HOLD",
    "STATUSES",
    "SUMMARY",
    "RecordsFile",
    "RequestRecord",
    "RunClock",
    "RunInfo",
    "RunWriter",
    "Status",
    "claim_run_dir",
    "claimed_run_dir",
    "disk_trouble",
    "failure",
    "failure_reason",
    "holds_run",
    "is_sealed",
    "out_error",
    "read_ledger",
    "read_records",
    "read_run_info",
    "records_to_table",
    "table_to_records",
    "unrecorded",
    "write_records",
    "write_run_info",
    "write_summary",
]
