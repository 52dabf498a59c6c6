"""The IntelliPerf service: jobs API, database, dispatch and dashboard (being built: see issue 5)."""
