"""The database: the record of every job, its events and result, the API tokens and the workers."""
