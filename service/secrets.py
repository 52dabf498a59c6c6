"""Job secrets: the GitHub token a worker clones and opens the pull request with, and the LLM key.

They arrive as request headers with the submission, are kept encrypted (Fernet, with a key derived from
``INTELLIPERF_SECRET_KEY``, which the service and its workers share) beside the job, are read by the
worker that runs it, and are deleted when the job finishes. They are never in the job spec, the report,
an event or a log.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from pydantic import SecretStr
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from service.db.models import JobSecret

__all__ = ["SECRET_HEADERS", "SecretBox", "SecretError", "delete_secrets", "load_secrets", "store_secrets"]

# secret name -> the request header that carries it
SECRET_HEADERS = {"github_token": "X-IntelliPerf-GitHub-Token", "llm_key": "X-IntelliPerf-LLM-Key"}


class SecretError(RuntimeError):
    """A secret cannot be kept or read (no key configured, or a key other than the one that wrote it)."""


class SecretBox:
    def __init__(self, key: SecretStr) -> None:
        digest = hashlib.sha256(key.get_secret_value().encode()).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(digest))

    def encrypt(self, value: str) -> bytes:
        return self._fernet.encrypt(value.encode())

    def decrypt(self, token: bytes) -> str:
        try:
            return self._fernet.decrypt(token).decode()
        except InvalidToken:
            raise SecretError(
                "a job secret cannot be decrypted: the service's INTELLIPERF_SECRET_KEY is not the one "
                "it was stored with"
            ) from None


def store_secrets(session: Session, job_id: str, secrets: dict[str, str], box: SecretBox) -> None:
    for name, value in secrets.items():
        session.add(JobSecret(job_id=job_id, name=name, ciphertext=box.encrypt(value)))


def load_secrets(session: Session, job_id: str, box: SecretBox | None) -> dict[str, str]:
    rows = session.scalars(select(JobSecret).where(JobSecret.job_id == job_id)).all()
    if rows and box is None:
        raise SecretError(
            "the job carries secrets but the service has no INTELLIPERF_SECRET_KEY to read them"
        )
    return {row.name: box.decrypt(row.ciphertext) for row in rows} if box else {}


def delete_secrets(session: Session, job_id: str) -> None:
    session.execute(delete(JobSecret).where(JobSecret.job_id == job_id))
