"""The `samsa` command: run a job, list config keys, show or reset checkpoints."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from samsa.exceptions import SamsaError
from samsa.runtime.config.config import Config, default_registry
from samsa.runtime.config.job import JobConfig
from samsa.runtime.config.loader import load_raw
from samsa.streams import SystemStreamPartition

log = logging.getLogger("samsa")


def _load(args: argparse.Namespace) -> JobConfig:
    overrides = {}
    for item in args.config or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SamsaError(f"--config {item!r}: write key=value")
        overrides[key] = value
    if getattr(args, "deploy", None):
        overrides["job.deploy"] = args.deploy
    # Overrides apply before validation, so one can mend a bad value in the file.
    return JobConfig(Config({**load_raw(args.job), **overrides}))


def _cmd_run(args: argparse.Namespace) -> int:
    from samsa.deploy.local import LocalSupervisor, install_stop_handlers

    job = _load(args)
    if args.container_id is not None:
        return _run_container(job, args)
    passthrough = [str(args.job), *(f"--config={c}" for c in args.config or [])]
    if args.until_caught_up:
        passthrough.append("--until-caught-up")
    supervisor = LocalSupervisor(job, passthrough)
    install_stop_handlers(supervisor.stop)
    return supervisor.run()


def _run_container(job: JobConfig, args: argparse.Namespace) -> int:
    from samsa.deploy.local import install_stop_handlers
    from samsa.runtime.container import Container
    from samsa.runtime.coordinator import JobCoordinator

    coordinator = JobCoordinator(job)
    if args.from_supervisor:
        model = coordinator.read_model()
        if model is None:
            raise SamsaError(
                "no job model was published; start the job with `samsa run` without --container-id"
            )
    else:
        model = coordinator.prepare()
    container = Container(job, model.container(args.container_id), until_caught_up=args.until_caught_up)
    install_stop_handlers(container.stop)
    container.run()
    return 0


def _cmd_config_keys(args: argparse.Namespace) -> int:
    print(default_registry().render())
    return 0


def _job_tasks(job: JobConfig) -> dict[str, list[SystemStreamPartition]]:
    from samsa.runtime.coordinator import JobCoordinator
    from samsa.runtime.job_model import build_job_model

    coordinator = JobCoordinator(job)
    model = coordinator.read_model() or build_job_model(coordinator.partition_counts(), job.container_count)
    return {t.name: list(t.partitions) for t in model.tasks}


def _cmd_checkpoint_show(args: argparse.Namespace) -> int:
    from samsa.checkpoint.versions import checkpoint_versions
    from samsa.kafka import KafkaConsumer
    from samsa.runtime.coordinator import checkpoint_manager, client_config

    job = _load(args)
    manager = checkpoint_manager(job)
    checkpoints = manager.read_last(checkpoint_versions(job.config)[1])
    tasks = _job_tasks(job)
    consumers: dict[str, KafkaConsumer] = {}
    print(f"checkpoints of job {job.job_key} (topic {manager.topic}); offsets are the next to read")
    for task_name in sorted(set(tasks) | set(checkpoints), key=_task_order):
        checkpoint = checkpoints.get(task_name)
        print(f"{task_name}:" + ("" if checkpoint else " no checkpoint yet"))
        if checkpoint is None:
            continue
        for ssp, offset in sorted(checkpoint.offsets.items()):
            consumer = consumers.get(ssp.system) or consumers.setdefault(
                ssp.system, KafkaConsumer(client_config(job, ssp.system))
            )
            _, high = consumer.watermarks((ssp.stream, ssp.partition))
            print(
                f"  {ssp.system}.{ssp.stream}#{ssp.partition}  offset {offset}  high watermark {high}  "
                f"lag {max(0, high - offset)}"
            )
    for consumer in consumers.values():
        consumer.close()
    return 0


def _cmd_checkpoint_reset(args: argparse.Namespace) -> int:
    from samsa.checkpoint.tool import live_containers, parse_reset_target, reset
    from samsa.checkpoint.versions import checkpoint_versions
    from samsa.kafka import KafkaConsumer, KafkaProducer
    from samsa.runtime.container import pid_dir
    from samsa.runtime.coordinator import JobCoordinator, checkpoint_manager, checkpoint_system, client_config

    job = _load(args)
    target = parse_reset_target(args.to)
    alive = live_containers(pid_dir(job))
    if alive:
        raise SamsaError(
            f"job {job.job_key} is running ({', '.join(alive)}); stop it before resetting checkpoints"
        )
    JobCoordinator(job).create_resources()
    tasks = _job_tasks(job)
    if args.task:
        unknown = sorted(set(args.task) - set(tasks))
        if unknown:
            known = ", ".join(sorted(tasks, key=_task_order))
            raise SamsaError(
                f"--task {', '.join(unknown)}: no such task in job {job.job_key} (tasks: {known})"
            )
        tasks = {name: tasks[name] for name in args.task}
    consumers: dict[str, KafkaConsumer] = {}

    def resolve(ssp: SystemStreamPartition, to: str | int) -> int:
        consumer = consumers.get(ssp.system) or consumers.setdefault(
            ssp.system, KafkaConsumer(client_config(job, ssp.system))
        )
        low, high = consumer.watermarks((ssp.stream, ssp.partition))
        if to == "earliest":
            return low
        if to == "latest":
            return high
        assert isinstance(to, int)
        return consumer.offsets_for_times([(ssp.stream, ssp.partition)], to)[(ssp.stream, ssp.partition)]

    producer = KafkaProducer(client_config(job, checkpoint_system(job), "producer"))
    try:
        write_versions, read_versions = checkpoint_versions(job.config)
        manager = checkpoint_manager(job, producer)
        written = reset(manager, tasks, target, resolve, write_versions, read_versions)
    finally:
        producer.close()
        for consumer in consumers.values():
            consumer.close()
    for task_name, checkpoint in sorted(written.items(), key=lambda kv: _task_order(kv[0])):
        offsets = ", ".join(f"{s.stream}#{s.partition}={o}" for s, o in sorted(checkpoint.offsets.items()))
        print(f"{task_name}: {offsets}")
    return 0


def _task_order(name: str) -> tuple[int, str]:
    tail = name.rsplit(" ", 1)[-1]
    return (int(tail), name) if tail.isdigit() else (sys.maxsize, name)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="samsa", description=__doc__)
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    sub = parser.add_subparsers(dest="command", required=True)

    def job_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("job", type=Path, help="job config: .properties, .yaml or .yml")
        p.add_argument("--config", action="append", metavar="KEY=VALUE", help="override a config key")

    run = sub.add_parser("run", help="run a job (all containers, supervised) or one container")
    job_args(run)
    run.add_argument("--container-id", help="run only this container (for an outside orchestrator)")
    run.add_argument("--deploy", choices=["local", "spark"], help="override job.deploy")
    run.add_argument(
        "--until-caught-up",
        action="store_true",
        help="stop once every input reaches the high watermark seen at start",
    )
    run.add_argument("--from-supervisor", action="store_true", help=argparse.SUPPRESS)
    run.set_defaults(func=_cmd_run)

    config = sub.add_parser("config", help="job configuration").add_subparsers(
        dest="config_cmd", required=True
    )
    config.add_parser("keys", help="print every known config key").set_defaults(func=_cmd_config_keys)

    checkpoint = sub.add_parser("checkpoint", help="inspect or reset checkpoints (job stopped)")
    cp = checkpoint.add_subparsers(dest="checkpoint_cmd", required=True)
    show = cp.add_parser("show", help="print each task's checkpointed offsets and lag")
    job_args(show)
    show.set_defaults(func=_cmd_checkpoint_show)
    reset = cp.add_parser("reset", help="move every task's checkpoint (the job must be stopped)")
    job_args(reset)
    reset.add_argument("--to", required=True, help="earliest, latest, epoch ms, or ISO time")
    reset.add_argument("--task", action="append", help="only this task (repeatable)")
    reset.set_defaults(func=_cmd_checkpoint_reset)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.func(args))
    except SamsaError as e:
        log.error("%s", e)
        return 2


if __name__ == "__main__":
    sys.exit(main())
