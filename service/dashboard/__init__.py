"""The operators' page: server-rendered HTML over the same database as the API."""
