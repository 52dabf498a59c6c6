"""The HTTP API. ``create_app`` builds it; ``uvicorn --factory service.api.app:create_app`` serves it."""
