"""The conductor of a run, above the packages that send its load: it takes a run's plan (load.plan), picks the sender
(this process's driver, or a dask cluster's workers), and leaves the run directory and its summary.  `load` and
`distributed` know nothing of each other's choice: it is made here, in one call (conduct.senders.open_sender)."""
