"""docker/: the images, the Compose cluster, the load balancer and the health checks.

Without a Docker engine (this machine, CI) the files are checked statically against the code
they drive: the Compose file parses and hangs together (health checks, ``depends_on``, build
contexts), every ``percolator`` command line is accepted by the real CLI parser, every
``PERCOLATOR_*`` variable is one the process reads, the Dockerfiles copy files that exist, and
ports agree between Compose, haproxy.cfg and the server settings. Where an engine answers, the
cluster is started for real (``up --build --wait``), used through the load balancer with
psycopg and by a Spark job, and removed (``down -v``).
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from percolator.connectors.spark.options import COORDINATOR_ENV, STORE_ENV
from percolator.server import config as server_config
from percolator.server.cli import build_parser
from percolator.server.storage.dsn import parse_dsns
from tests.conftest import docker_engine_available

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
COMPOSE = DOCKER / "compose.yaml"
HAPROXY = DOCKER / "haproxy.cfg"
DOCKERFILE = DOCKER / "Dockerfile"
SPARK_DOCKERFILE = DOCKER / "spark.Dockerfile"
HEALTHCHECK = DOCKER / "healthcheck.py"

SERVER_ENV = {server_config.ENV_PREFIX + f.name.upper() for f in fields(server_config.ServerConfig)}
"""Every variable ``percolator serve`` reads (server/config.py)."""

SENTINEL = "sentinel-from-the-environment"


# -- helpers --------------------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    """docker/compose.yaml, parsed (anchors and merge keys resolved)."""
    return yaml.safe_load(COMPOSE.read_text())


def services() -> dict[str, dict[str, Any]]:
    """The Compose services by name."""
    return compose()["services"]


def dockerfile_of(service: dict[str, Any]) -> Path | None:
    """The Dockerfile a service is built from, or None for a pulled image."""
    build = service.get("build")
    if build is None:
        return None
    if isinstance(build, str):
        return (DOCKER / build / "Dockerfile").resolve()
    return (DOCKER / build.get("context", ".") / build.get("dockerfile", "Dockerfile")).resolve()


def percolator_services() -> dict[str, dict[str, Any]]:
    """Services running the Percolator image (docker/Dockerfile, entrypoint ``percolator``)."""
    return {n: s for n, s in services().items() if dockerfile_of(s) == DOCKERFILE.resolve()}


def spark_services() -> dict[str, dict[str, Any]]:
    """Services running the Spark image (docker/spark.Dockerfile)."""
    return {n: s for n, s in services().items() if dockerfile_of(s) == SPARK_DOCKERFILE.resolve()}


def command_of(service: dict[str, Any]) -> list[str]:
    """A service's command as a list (the image's CMD when it sets none)."""
    command = service.get("command")
    if command is None:
        return default_cmd(dockerfile_of(service))
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a mapping (Compose accepts a mapping or ``KEY=VALUE`` items)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def interpolate(value: str) -> str:
    """Compose's ``${NAME:-default}`` with nothing set: the default."""
    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}", lambda m: m.group(1) or "", value)


def parse_percolator(argv: list[str]) -> argparse.Namespace:
    """Parse a command line with the real CLI parser; a rejected one fails the test."""
    try:
        return build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse prints its reason to stderr
        pytest.fail(f"percolator rejects {argv}: exit {exc.code}")


def load_healthcheck() -> ModuleType:
    """docker/healthcheck.py as a module."""
    spec = importlib.util.spec_from_file_location("percolator_docker_healthcheck", HEALTHCHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def healthcheck_argv(service: dict[str, Any]) -> list[str]:
    """The health check's command line (``CMD`` form), without the ``CMD``."""
    test = service["healthcheck"]["test"]
    assert isinstance(test, list) and test[0] == "CMD", f"use the exec form: {test}"
    return [str(t) for t in test[1:]]


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile: comments dropped, continuations joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, rest = line.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    assert not pending, f"{path}: dangling line continuation"
    return instructions


def build_args(path: Path) -> dict[str, str]:
    """The default of every ``ARG NAME=value`` of a Dockerfile (quotes removed)."""
    values: dict[str, str] = {}
    for keyword, rest in dockerfile_instructions(path):
        if keyword == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            values[name.strip()] = value.strip().strip('"')
    return values


def stages(path: Path) -> list[str]:
    """The base image of each stage, ARG defaults substituted."""
    args = build_args(path)
    bases = []
    for keyword, rest in dockerfile_instructions(path):
        if keyword == "FROM":
            image = rest.split()[0]
            bases.append(re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), ""), image))
    return bases


def final_stage(path: Path) -> list[tuple[str, str]]:
    """The instructions of the last stage (what the image is)."""
    instructions = dockerfile_instructions(path)
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def default_cmd(path: Path | None) -> list[str]:
    """The image's CMD (exec form)."""
    assert path is not None
    cmds = [json.loads(rest) for keyword, rest in final_stage(path) if keyword == "CMD"]
    return cmds[-1] if cmds else []


def exposed_ports(path: Path) -> set[int]:
    """The ports of the final stage's EXPOSE lines."""
    ports: set[int] = set()
    for keyword, rest in final_stage(path):
        if keyword == "EXPOSE":
            ports.update(int(p.split("/")[0]) for p in rest.split())
    return ports


def image_env(path: Path) -> dict[str, str]:
    """``ENV NAME=value`` settings of the final stage."""
    env: dict[str, str] = {}
    for keyword, rest in final_stage(path):
        if keyword == "ENV":
            for item in shlex.split(rest):
                name, _, value = item.partition("=")
                env[name] = value
    return env


def port_of(address: str) -> int:
    """The port of ``HOST:PORT``."""
    return int(address.rpartition(":")[2])


def host_of(address: str) -> str:
    """The host of ``HOST:PORT``."""
    return address.rpartition(":")[0]


def dev_requirement(name: str) -> str:
    """The requirement of ``name`` in pyproject's dev extras, spaces removed."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for requirement in project["optional-dependencies"]["dev"]:
        if re.match(rf"{re.escape(name)}\b", requirement):
            return requirement.replace(" ", "")
    raise AssertionError(f"{name} is not in the dev extras")


def serve_config(service: dict[str, Any]) -> server_config.ServerConfig:
    """The settings a ``serve`` service runs with: its flags over its environment over the
    image's."""
    args = parse_percolator(command_of(service))
    env = {k: interpolate(v) for k, v in image_env(DOCKERFILE).items()}
    env.update({k: interpolate(v) for k, v in environment_of(service).items()})
    return server_config.load(args, environ=env)


def sql_services() -> dict[str, dict[str, Any]]:
    """The services running ``percolator serve``."""
    return {
        n: s
        for n, s in percolator_services().items()
        if parse_percolator(command_of(s)).command == "serve"
    }


def haproxy_sections() -> dict[str, list[str]]:
    """haproxy.cfg as ``"kind name" -> its lines`` (comments dropped)."""
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for raw in HAPROXY.read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line[0].isspace():
            current = sections.setdefault(" ".join(line.split()[:2]), [])
        else:
            current.append(line.strip())
    return sections


# -- the Compose file -----------------------------------------------------------------------------


def test_compose_has_the_cluster() -> None:
    """2 Postgres 16 shards, a coordinator, 2 SQL servers, 2 workers, haproxy, Spark."""
    all_services = services()
    shards = {n: s for n, s in all_services.items() if str(s.get("image", "")) == "postgres:16"}
    assert len(shards) == 2
    for name, shard in shards.items():
        command = " ".join(command_of(shard))
        assert "max_locks_per_transaction=1024" in command, name
        assert "max_connections=300" in command, name

    commands = {
        n: parse_percolator(command_of(s)).command for n, s in percolator_services().items()
    }
    assert sorted(commands.values()).count("serve") == 2
    assert list(commands.values()).count("coordinator") == 1
    replicas = sum(
        (s.get("deploy") or {}).get("replicas", 1)
        for n, s in percolator_services().items()
        if commands[n] == "worker"
    )
    assert replicas == 2

    assert any(str(s.get("image", "")).startswith("haproxy:") for s in all_services.values())
    spark_commands = [" ".join(command_of(s)) for s in spark_services().values()]
    assert any("deploy.master.Master" in c for c in spark_commands)
    assert any("deploy.worker.Worker" in c for c in spark_commands)


def test_compose_has_no_duplicate_keys() -> None:
    """Compose refuses a key given twice in one mapping; PyYAML would keep the last silently."""
    todo: list[yaml.Node] = [yaml.compose(COMPOSE.read_text())]
    seen: set[int] = set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys = [k.value for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"]
            duplicates = {k for k in keys if keys.count(k) > 1}
            assert not duplicates, f"line {node.start_mark.line + 1}: {sorted(duplicates)}"
            todo.extend(v for _, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            todo.extend(node.value)


def test_every_service_has_a_healthcheck() -> None:
    for name, service in services().items():
        check = service.get("healthcheck")
        assert check, f"{name} has no healthcheck"
        assert not check.get("disable"), name
        test = check.get("test")
        assert isinstance(test, list) and test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, name


def test_depends_on_names_healthy_services_in_order() -> None:
    all_services = services()
    for name, service in all_services.items():
        depends = service.get("depends_on") or {}
        assert isinstance(depends, dict), f"{name}: depends_on needs conditions"
        for dependency, how in depends.items():
            assert dependency in all_services, f"{name} depends on unknown {dependency}"
            assert how.get("condition") == "service_healthy", f"{name} -> {dependency}"

    def upstream(name: str) -> set[str]:
        seen: set[str] = set()
        todo = list(all_services[name].get("depends_on") or {})
        while todo:
            dependency = todo.pop()
            if dependency not in seen:
                seen.add(dependency)
                todo.extend(all_services[dependency].get("depends_on") or {})
        assert name not in seen, f"{name} depends on itself"
        return seen

    shards = {n for n, s in all_services.items() if str(s.get("image", "")) == "postgres:16"}
    coordinator = next(
        n
        for n, s in percolator_services().items()
        if parse_percolator(command_of(s)).command == "coordinator"
    )
    assert shards <= upstream(coordinator)
    for name in percolator_services():
        if name != coordinator:
            assert {coordinator} | shards <= upstream(name), name
    lb = next(n for n, s in all_services.items() if str(s.get("image", "")).startswith("haproxy"))
    assert set(sql_services()) <= upstream(lb)
    for name in spark_services():
        assert coordinator in upstream(name), name


def test_build_contexts_and_dockerfiles_exist() -> None:
    built = 0
    for name, service in services().items():
        path = dockerfile_of(service)
        if path is None:
            assert service.get("image"), f"{name} has neither build nor image"
            continue
        built += 1
        assert path.is_file(), f"{name}: {path} missing"
        context = (DOCKER / service["build"]["context"]).resolve()
        assert context == REPO, f"{name}: the images build from the repository root"
    assert built


def test_mounted_files_exist() -> None:
    for name, service in services().items():
        for volume in service.get("volumes") or []:
            source = str(volume).split(":")[0]
            if source.startswith((".", "/")):
                assert (DOCKER / source).exists(), f"{name} mounts missing {source}"


def test_docker_compose_accepts_the_file() -> None:
    """``docker compose config`` (no engine needed) where the Compose plugin is installed."""
    if shutil.which("docker") is None:
        pytest.skip("no docker client")
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("the docker client has no compose plugin")
    result = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


# -- percolator command lines and settings --------------------------------------------------------


def test_percolator_command_lines_parse() -> None:
    """Every command line of the Percolator image, and its default CMD, is accepted."""
    assert parse_percolator(default_cmd(DOCKERFILE)).command == "serve"
    for name, service in percolator_services().items():
        args = parse_percolator(command_of(service))
        assert args.command in {"serve", "coordinator", "worker"}, name
        assert getattr(args, "run", None) is not None, name


def test_sql_servers_use_the_coordinator_and_no_embedded_workers() -> None:
    coordinator = next(
        s
        for s in percolator_services().values()
        if parse_percolator(command_of(s)).command == "coordinator"
    )
    coordinator_args = parse_percolator(command_of(coordinator))
    assert host_of(coordinator_args.coordinator_listen) == "0.0.0.0"
    assert len(parse_dsns(coordinator_args.store)) == 2

    servers = sql_services()
    assert len(servers) == 2
    for name, service in servers.items():
        config = serve_config(service)
        assert config.host_port == ("0.0.0.0", 5433), name
        assert config.observer_workers == 0, name
        assert config.coordinator is not None, name
        assert port_of(config.coordinator) == port_of(coordinator_args.coordinator_listen), name
        assert config.store == coordinator_args.store, f"{name}: shards differ (or their order)"
        assert config.password, f"{name} listens on 0.0.0.0: it needs a password"


def test_percolator_environment_variables_are_read() -> None:
    """A ``PERCOLATOR_*`` variable of a service is one its command reads: a setting of
    server/config.py for ``serve``, else a default of the subcommand's parser."""
    for name, service in percolator_services().items():
        argv = command_of(service)
        command = parse_percolator(argv).command
        for variable in environment_of(service):
            if not variable.startswith(server_config.ENV_PREFIX):
                continue
            if command == "serve":
                assert variable in SERVER_ENV, f"{name}: serve does not read {variable}"
                continue
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv(variable, SENTINEL)
                args = build_parser().parse_args(argv)
            assert SENTINEL in vars(args).values(), f"{name}: {command} does not read {variable}"


def test_worker_environment_reaches_its_settings() -> None:
    for name, service in percolator_services().items():
        argv = command_of(service)
        if parse_percolator(argv).command != "worker":
            continue
        env = {k: interpolate(v) for k, v in environment_of(service).items()}
        with pytest.MonkeyPatch.context() as mp:
            for key, value in env.items():
                mp.setenv(key, value)
            args = build_parser().parse_args(argv)
        assert len(parse_dsns(args.store)) == 2, name
        assert host_of(args.coordinator) in services(), name


def test_image_environment_is_read_by_serve() -> None:
    for variable in image_env(DOCKERFILE):
        if variable.startswith(server_config.ENV_PREFIX):
            assert variable in SERVER_ENV, variable


def test_spark_environment_is_read_by_the_connector() -> None:
    """The Spark containers give the connector its shards and coordinator (and the example job
    the SQL password, a setting of the SQL servers)."""
    for name, service in spark_services().items():
        env = environment_of(service)
        assert {STORE_ENV, COORDINATOR_ENV} <= set(env), name
        for variable in env:
            if variable.startswith(server_config.ENV_PREFIX):
                assert variable in {STORE_ENV, COORDINATOR_ENV} | SERVER_ENV, (name, variable)


def test_store_names_the_shards_on_their_port() -> None:
    all_services = services()
    shards = [n for n, s in all_services.items() if str(s.get("image", "")) == "postgres:16"]
    stores = set()
    for name, service in {**percolator_services(), **spark_services()}.items():
        env = environment_of(service)
        argv = command_of(service)
        store = env.get(STORE_ENV)
        if "--store" in argv:
            store = argv[argv.index("--store") + 1]
        assert store, f"{name} has no store"
        stores.add(store)
        hosts = [re.match(r"postgresql://[^@/]*@([^:/]+):(\d+)/", d) for d in parse_dsns(store)]
        assert all(hosts), store
        assert [h.group(1) for h in hosts if h] == sorted(shards), f"{name}: shard order"
        assert {h.group(2) for h in hosts if h} == {"5432"}
        assert "PGPASSWORD" in env, f"{name}: the shards' password"
    assert len(stores) == 1, "every process must list the same shards in the same order"


def test_coordinator_address_is_the_coordinator_service() -> None:
    coordinator_name, coordinator = next(
        (n, s)
        for n, s in percolator_services().items()
        if parse_percolator(command_of(s)).command == "coordinator"
    )
    listen_port = port_of(parse_percolator(command_of(coordinator)).coordinator_listen)
    for name, service in {**percolator_services(), **spark_services()}.items():
        address = environment_of(service).get(COORDINATOR_ENV)
        if name != coordinator_name:
            assert address == f"{coordinator_name}:{listen_port}", name


# -- health checks --------------------------------------------------------------------------------


def test_healthchecks_are_known_and_aimed_right() -> None:
    healthcheck = load_healthcheck()
    parser = healthcheck.build_parser()
    for name, service in {**percolator_services(), **spark_services()}.items():
        argv = healthcheck_argv(service)
        if argv[0] == "percolator":
            parse_percolator(argv[1:])
            continue
        assert argv[0] == "percolator-healthcheck", name
        try:
            check = parser.parse_args(argv[1:])
        except SystemExit:
            pytest.fail(f"{name}: percolator-healthcheck rejects {argv[1:]}")
        command = command_of(service)
        if name in percolator_services():
            args = parse_percolator(command)
            expected = {"serve": "sql", "coordinator": "coordinator", "worker": "worker"}
            assert check.check == expected[args.command], name
            if args.command == "serve":
                assert port_of(check.target) == serve_config(service).host_port[1], name
            elif args.command == "coordinator":
                assert port_of(check.target) == port_of(args.coordinator_listen), name
            else:
                assert check.target == environment_of(service)[COORDINATOR_ENV], name
        else:
            env = environment_of(service)
            if "deploy.master.Master" in " ".join(command):
                assert check.check == "spark-master", name
                assert check.target.endswith(":" + env["SPARK_MASTER_WEBUI_PORT"]), name
            else:
                assert check.check == "spark-worker", name
                master = next(
                    s
                    for s in spark_services().values()
                    if "deploy.master.Master" in " ".join(command_of(s))
                )
                master_env = environment_of(master)
                webui = f"http://{master_env['SPARK_MASTER_HOST']}:"
                assert check.target == webui + master_env["SPARK_MASTER_WEBUI_PORT"], name
                url = f"spark://{master_env['SPARK_MASTER_HOST']}:{master_env['SPARK_MASTER_PORT']}"
                assert url in command, name


def test_shard_healthcheck_uses_tcp() -> None:
    for name, service in services().items():
        if str(service.get("image", "")) == "postgres:16":
            argv = healthcheck_argv(service)
            assert argv[0] == "pg_isready", name
            assert argv[argv.index("-h") + 1] == "127.0.0.1", name


def test_healthcheck_script_fails_fast_on_a_closed_port(
    capsys: pytest.CaptureFixture[str],
) -> None:
    healthcheck = load_healthcheck()
    port = _free_port()
    started = time.monotonic()
    assert healthcheck.main(["sql", f"127.0.0.1:{port}"]) == 1
    assert time.monotonic() - started < 5
    assert "unhealthy: sql" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        healthcheck.main(["no-such-check"])


def test_images_install_the_healthcheck() -> None:
    for path in (DOCKERFILE, SPARK_DOCKERFILE):
        text = path.read_text()
        assert "docker/healthcheck.py /opt/percolator/bin/percolator-healthcheck" in text, path


# -- the Dockerfiles ------------------------------------------------------------------------------


def dockerignore_patterns() -> list[str]:
    path = REPO / ".dockerignore"
    if not path.exists():
        return []
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize("path", [DOCKERFILE, SPARK_DOCKERFILE], ids=lambda p: p.name)
def test_copy_sources_exist_and_are_not_ignored(path: Path) -> None:
    patterns = dockerignore_patterns()
    copied = 0
    for keyword, rest in dockerfile_instructions(path):
        if keyword not in ("COPY", "ADD"):
            continue
        parts = [p for p in shlex.split(rest) if not p.startswith("--")]
        if "--from=" in rest:
            continue
        for source in parts[:-1]:
            copied += 1
            assert (REPO / source).exists(), f"{path.name}: COPY {source}: missing"
            for pattern in patterns:
                assert not fnmatch.fnmatch(source.rstrip("/"), pattern), (source, pattern)
    assert copied


def test_dockerfile_is_one_small_non_root_image() -> None:
    bases = stages(DOCKERFILE)
    assert bases and set(bases) == {"python:3.11-slim"}
    final = final_stage(DOCKERFILE)
    entrypoints = [json.loads(rest) for keyword, rest in final if keyword == "ENTRYPOINT"]
    assert entrypoints == [["percolator"]]
    users = [rest for keyword, rest in final if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert {5433, 7470} <= exposed_ports(DOCKERFILE)
    text = DOCKERFILE.read_text()
    assert re.search(r"pip install \.(\s|$)", text), "install the project from its own files"
    assert "[dev]" not in text and "pyspark" not in text


def test_dockerfile_exposes_the_ports_in_use() -> None:
    exposed = exposed_ports(DOCKERFILE)
    for name, service in sql_services().items():
        assert serve_config(service).host_port[1] in exposed, name
    for name, service in percolator_services().items():
        args = parse_percolator(command_of(service))
        if args.command == "coordinator":
            assert port_of(args.coordinator_listen) in exposed, name


def test_spark_dockerfile_matches_the_connector() -> None:
    assert all(base.startswith("python:3.11-slim") for base in stages(SPARK_DOCKERFILE))
    args = build_args(SPARK_DOCKERFILE)
    assert args["PYSPARK_SPEC"] == dev_requirement("pyspark")
    assert args["PYARROW_SPEC"] == dev_requirement("pyarrow")
    final = final_stage(SPARK_DOCKERFILE)
    users = [rest for keyword, rest in final if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert re.search(r"pip install \. ", SPARK_DOCKERFILE.read_text())
    env = image_env(SPARK_DOCKERFILE)
    assert env["PYSPARK_PYTHON"] == "/opt/percolator/bin/python"


def test_example_job_is_mounted_and_compiles() -> None:
    job = DOCKER / "jobs" / "percolator_example.py"
    compile(job.read_text(), str(job), "exec")
    for name, service in spark_services().items():
        assert any(str(v).startswith("./jobs:") for v in service.get("volumes") or []), name


# -- haproxy --------------------------------------------------------------------------------------


def test_haproxy_backends_are_the_sql_servers() -> None:
    sections = haproxy_sections()
    assert any("mode tcp" in line for line in sections["defaults"])
    backends = {k.split()[1]: v for k, v in sections.items() if k.startswith("backend ")}
    servers = sql_services()
    named: dict[str, int] = {}
    for lines in backends.values():
        for line in lines:
            if line.startswith("server "):
                address = line.split()[2]
                named[host_of(address)] = port_of(address)
    assert set(named) == set(servers), "haproxy must balance exactly the SQL servers"
    for name, port in named.items():
        assert port == serve_config(servers[name]).host_port[1], name

    frontends = {k.split()[1]: v for k, v in sections.items() if k.startswith("frontend ")}
    sql_frontend = next(v for v in frontends.values() if any("default_backend" in x for x in v))
    bind = next(line.split()[1] for line in sql_frontend if line.startswith("bind "))
    target = next(line.split()[1] for line in sql_frontend if line.startswith("default_backend"))
    assert target in backends

    lb = next(s for s in services().values() if str(s.get("image", "")).startswith("haproxy"))
    published = [interpolate(str(p)) for p in lb["ports"]]
    assert [int(p.rsplit(":", 1)[1]) for p in published] == [port_of(bind)]
    assert any(
        str(v).startswith("./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg") for v in lb["volumes"]
    )
    monitor = next(v for v in frontends.values() if any("monitor-uri" in x for x in v))
    monitor_bind = next(line.split()[1] for line in monitor if line.startswith("bind "))
    uri = next(line.split()[1] for line in monitor if line.startswith("monitor-uri"))
    check = " ".join(healthcheck_argv(lb))
    assert f"/dev/tcp/127.0.0.1/{port_of(monitor_bind)}" in check and uri in check


def test_haproxy_accepts_the_config() -> None:
    """``haproxy -c`` where haproxy is installed (the servers' names need not resolve)."""
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed")
    result = subprocess.run(
        ["haproxy", "-c", "-f", str(HAPROXY)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_docs_name_every_service() -> None:
    text = (REPO / "docs" / "docker.md").read_text()
    for name in services():
        assert f"`{name}`" in text, name


# -- with a Docker engine: the real cluster -------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Cluster:
    """A running Compose cluster."""

    compose: list[str]
    """``docker compose -p PROJECT -f compose.yaml``: add a subcommand."""
    port: int
    """The load balancer's port on this host."""
    password: str
    """The SQL superuser's password."""

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres password={self.password}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """The Compose cluster under a project name of its own, on free host ports."""
    if not docker_engine_available():
        pytest.skip("no Docker engine answers (docker info fails): the cluster is not started")
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("the docker client has no compose plugin")
    running = Cluster(
        ["docker", "compose", "-p", f"percolator-test-{uuid.uuid4().hex[:8]}", "-f", str(COMPOSE)],
        _free_port(),
        uuid.uuid4().hex,
    )
    env = {
        **os.environ,
        "PERCOLATOR_PORT": str(running.port),
        "PERCOLATOR_PASSWORD": running.password,
        "SPARK_UI_PORT": str(_free_port()),
    }
    try:
        subprocess.run(
            [*running.compose, "up", "-d", "--build", "--wait", "--wait-timeout", "900"],
            env=env,
            check=True,
            timeout=1800,
        )
        yield running
    finally:
        subprocess.run(
            [*running.compose, "logs", "--no-color", "--tail", "50"], env=env, check=False
        )
        subprocess.run([*running.compose, "down", "-v", "--remove-orphans"], env=env, check=False)


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_cluster_answers_sql_through_the_load_balancer(cluster: Cluster) -> None:
    import psycopg

    dsn = cluster.dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE docker_smoke (id int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO docker_smoke VALUES (1, 'one'), (2, 'two')")
        assert conn.execute("SELECT name FROM docker_smoke ORDER BY id").fetchall() == [
            ("one",),
            ("two",),
        ]
    # New connections land on either SQL server; the other learns of the new table when it
    # next polls the catalog (catalog_poll, 1 s).
    deadline = time.monotonic() + 30
    seen = 0
    while seen < 4:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                rows = conn.execute("SELECT count(*) FROM docker_smoke").fetchone()
            assert rows == (2,)
            seen += 1
        except psycopg.errors.UndefinedTable:
            assert time.monotonic() < deadline, "a SQL server never saw the new table"
            time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_cluster_runs_the_example_spark_job(cluster: Cluster) -> None:
    result = subprocess.run(
        [
            *cluster.compose,
            "exec",
            "-T",
            "spark-master",
            "spark-submit",
            "--master",
            "spark://spark-master:7077",
            "/var/lib/spark/jobs/percolator_example.py",
            "--rows",
            "1000",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "spark_example holds 1000 rows" in result.stdout
