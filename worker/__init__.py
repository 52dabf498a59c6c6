"""What runs on the GPU nodes: the Celery task, the executor that runs the engine, heartbeats."""
