"""The FastAPI application: jobs API, operations endpoints, dashboard; the dispatcher runs beside it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anyio import to_thread
from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from prometheus_client.core import CollectorRegistry
from sqlalchemy.exc import InterfaceError, OperationalError

from intelliperf import __version__
from intelliperf.contract import JobSpec
from intelliperf.contract.counters import ENTRY_LIMIT_BYTES
from intelliperf.jobqueue import make_celery
from intelliperf.project_archive import ArchiveLimits
from service.api import jobs, kernels, ops, worker_api
from service.api.archive_checks import ArchiveChecks
from service.api.deps import validation_error_after_auth
from service.api.limits import BodySizeLimit, BodyTooLarge
from service.api.worker_api import COUNTER_UPLOAD, REPRODUCER_UPLOAD
from service.db.migrate import upgrade
from service.db.session import Database
from service.dispatch import Dispatcher
from service.fleet import FleetCache
from service.settings import ServiceSettings, get_service_settings

__all__ = ["create_app"]

# Sync routes run on this many threads per process (anyio's default is 40): within the database pool
# (service.db.session), so no request opens and closes an overflow connection, and few, since the
# threads take turns at the GIL (measured on 2 cores: 8 served more submissions/s than 16)
API_THREADS = 8
DATABASE_RETRY_AFTER_S = 5

log = logging.getLogger("intelliperf.service")

DESCRIPTION = """IntelliPerf's jobs API. Submit a job spec (or a project archive with one), follow its
events, read its report and diff. Authenticate with `Authorization: Bearer <token>`."""


def create_app(
    settings: ServiceSettings | None = None, *, migrate: bool = True, dispatch: bool = True
) -> FastAPI:
    settings = settings or get_service_settings()
    db = Database(settings.resolved_database_url)
    if migrate:
        upgrade(settings.resolved_database_url)
    celery = make_celery(settings)
    dispatcher = Dispatcher(db, celery, settings)
    archive_checks = ArchiveChecks(
        ArchiveLimits(
            max_upload_bytes=settings.max_upload_bytes,
            max_bytes=settings.max_archive_bytes,
            max_members=settings.max_archive_members,
        ),
        workers=settings.archive_check_workers,
        max_waiting=settings.archive_check_max_waiting,
        per_token=settings.archive_checks_per_token,
        per_token_per_minute=settings.archive_checks_per_token_per_minute,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        to_thread.current_default_thread_limiter().total_tokens = API_THREADS
        if dispatch:
            dispatcher.start()
            dispatcher.notify()
        try:
            yield
        finally:
            dispatcher.stop()
            archive_checks.shutdown()
            db.dispose()

    app = FastAPI(
        title="IntelliPerf",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        separate_input_output_schemas=False,
    )
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ops.JobMetrics(db, settings.worker_stale_s))
    app.state.settings, app.state.db, app.state.celery = settings, db, celery
    app.state.dispatcher, app.state.metrics_registry = dispatcher, registry
    app.state.archive_checks = archive_checks
    app.state.fleet = FleetCache(
        settings.worker_stale_s, ttl_s=settings.fleet_cache_s, worker_forget_s=settings.worker_forget_s
    )
    reproducer = (REPRODUCER_UPLOAD, settings.max_reproducer_bytes + 2**20)
    counters = (COUNTER_UPLOAD, ENTRY_LIMIT_BYTES)
    app.add_middleware(
        BodySizeLimit, max_bytes=settings.max_upload_bytes + 2**20, overrides=[reproducer, counters]
    )

    app.add_exception_handler(RequestValidationError, validation_error_after_auth)

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def _database_unavailable(_request: Request, exc: Exception) -> JSONResponse:
        """The database is down, restarting or refusing connections: a client should retry, not give up."""
        dispatcher.database_unavailable()
        log.warning("database unavailable: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return JSONResponse(
            {"detail": "the service's database is unavailable; retry shortly"},
            status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)},
        )

    @app.exception_handler(BodyTooLarge)
    async def _too_large(_request: Request, exc: BodyTooLarge) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status.HTTP_413_CONTENT_TOO_LARGE)

    app.include_router(jobs.router)
    app.include_router(kernels.router)
    app.include_router(ops.router)
    app.include_router(worker_api.router)
    from service.dashboard import routes as dashboard

    app.include_router(dashboard.router)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            spec_schema = JobSpec.model_json_schema(ref_template="#/components/schemas/{model}")
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(spec_schema.pop("$defs", {}))
            components["JobSpec"] = spec_schema
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
