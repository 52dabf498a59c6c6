"""Test tools that ship with the package: a scripted OpenAI-compatible server for the LLM seam."""
