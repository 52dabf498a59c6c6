"""Deliveries: the secret in each broker message that carries a job, which a worker's claim must name.

The worker token is shared by every worker process; a process that learned it (a job that read a worker's
environment, say) could otherwise claim any queued job whose id it saw and be handed that job's secrets.
So each message the dispatcher sends carries a fresh random secret, and only the SHA-256 of it is stored
(``JobDelivery``), committed before the message is sent: a claim that names no delivery of its job is
refused. A job sent again (the broker lost it, or it waited long) gets another delivery; each stays valid
until the job finishes, so an older message that is still queued can run it too.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from service.db.models import JobDelivery, utcnow

__all__ = ["forget_deliveries", "is_delivered", "new_deliveries"]


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_deliveries(session: Session, job_ids: list[str]) -> dict[str, str]:
    """A new delivery secret for each job (job id -> secret), their hashes written in ``session``."""
    given = {job_id: secrets.token_urlsafe(32) for job_id in job_ids}
    if given:
        now = utcnow()
        rows = [{"secret_hash": _hash(s), "job_id": j, "created_at": now} for j, s in given.items()]
        session.execute(insert(JobDelivery.__table__), rows)
    return given


def is_delivered(session: Session, job_id: str, secret: str) -> bool:
    stored = session.scalar(select(JobDelivery.job_id).where(JobDelivery.secret_hash == _hash(secret)))
    return stored is not None and hmac.compare_digest(stored, job_id)


def forget_deliveries(session: Session, job_id: str) -> None:
    session.execute(delete(JobDelivery).where(JobDelivery.job_id == job_id))
