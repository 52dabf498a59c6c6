"""Placeholder router; the dashboard pages are added here."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(include_in_schema=False)
