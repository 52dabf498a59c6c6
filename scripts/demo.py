"""The newcomer's tour: start `intelliperf serve`, submit every bundled example as a job, follow each
job's events, and print what was found. Run through scripts/demo (which installs first)."""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "fixtures" / "gpu"


PREFERRED_PORT = 8000


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def choose_port(asked: int | None) -> int:
    """The port asked for (refused when taken), else 8000, else a free one, saying so."""
    if asked is not None:
        if not port_is_free(asked):
            raise SystemExit(f"port {asked} is taken by another program: give another --port, or none")
        return asked
    if port_is_free(PREFERRED_PORT):
        return PREFERRED_PORT
    port = free_port()
    print(f"port {PREFERRED_PORT} is taken by another program: the demo serves on port {port}", flush=True)
    return port


def has_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def archive_of(example: dict[str, str], replay: bool) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        folder = ROOT / "examples" / example["name"]
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.name != "report.json":
                archive.add(path, arcname=path.name)
        if replay:
            archive.add(RECORDED / example["name"] / "original", arcname="profile")
    return buffer.getvalue()


def spec_of(example: dict[str, str], replay: bool) -> dict[str, object]:
    spec: dict[str, object] = {
        "applications": [{"command": f"./{example['app']}"}],
        "formula": "diagnoseOnly",
    }
    if replay:
        spec["replay"] = "profile"
    else:
        spec["build_command"] = example["build"]
    return spec


def follow(client: httpx.Client, job_id: str) -> None:
    with client.stream("GET", f"/v1/jobs/{job_id}/events", timeout=None) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                if "message" in event:
                    print(f"    {event['message']}", flush=True)


def finding(report: dict[str, object]) -> str:
    present = [d for d in report.get("diagnoses", []) if isinstance(d, dict) and d.get("present")]
    if not present:
        return "no bottleneck"
    worst = present[0]
    names = {k["name"]: k["demangled"] for k in report.get("kernels", []) if isinstance(k, dict)}
    kernel = names.get(str(worst["kernel"]), str(worst["kernel"])).split("(")[0]
    where = ""
    if worst.get("locations"):
        location = worst["locations"][0]
        where = f" at {location['file']}:{location['line']}"
    return f"{worst['formula']} in {kernel}{where}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=None, help="default: 8000, or a free port if it is taken")
    parser.add_argument("--keep", action="store_true", help="keep the stack running for the dashboard")
    parser.add_argument("--replay", action="store_true", help="use the recorded profiles even with a GPU")
    parser.add_argument("--only", action="append", help="only this example (repeatable)")
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".demo-data", help="the stack's data")
    args = parser.parse_args()
    replay = args.replay or not has_gpu()
    data_dir = args.data_dir
    env = {**os.environ, "INTELLIPERF_DATA_DIR": str(data_dir)}
    port = choose_port(args.port)
    url = f"http://127.0.0.1:{port}"
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / "stack.log"
    print(f"starting the embedded stack on {url} (data in {data_dir}, its log in {log})", flush=True)
    with log.open("ab") as sink:  # serve's console (its job lines: the demo prints each job's its own way)
        server = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "intelliperf"), "serve", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace").splitlines()[-20:]
                print("the service did not start; the end of its log:", *tail, sep="\n", file=sys.stderr)
                return 1
            time.sleep(0.3)
        token = (data_dir / "admin-token").read_text().strip()
        examples = json.loads((ROOT / "examples" / "examples.json").read_text())
        examples = [e for e in examples if not args.only or e["name"] in args.only]
        how = "from profiles recorded on a GPU machine (no GPU here)" if replay else "on this machine's GPU"
        print(f"diagnosing {len(examples)} examples {how}", flush=True)
        results = []
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            for example in examples:
                response = client.post(
                    "/v1/jobs",
                    data={"spec": json.dumps(spec_of(example, replay))},
                    files={"archive": ("project.tar.gz", archive_of(example, replay), "application/gzip")},
                )
                response.raise_for_status()
                job_id = response.json()["id"]
                print(f"\n== {example['name']}: job {job_id}", flush=True)
                follow(client, job_id)
                job = client.get(f"/v1/jobs/{job_id}").json()
                report = client.get(f"/v1/jobs/{job_id}/report")
                found = finding(report.json()) if report.status_code == 200 else job.get("error") or ""
                results.append((example["name"], example.get("formula") or "none", job["status"], found))
        print("\nexample            expected           job        found")
        for name, expected, status, found in results:
            print(f"{name:<18} {expected:<18} {status:<10} {found}")
        if args.keep:
            print(f"\ndashboard: {url}/  (log in with the token in {data_dir / 'admin-token'})")
            print("the stack keeps running; Ctrl-C stops it", flush=True)
            server.wait()
        else:
            print(
                "\nthe stack is stopping; run with --keep to browse these jobs on the dashboard", flush=True
            )
        return 0 if all(status == "succeeded" for _, _, status, _ in results) else 1
    except KeyboardInterrupt:
        return 130
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()


if __name__ == "__main__":
    sys.exit(main())
