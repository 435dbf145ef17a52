"""The Spark deployment's settings and restart policy, without starting Spark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from background import MINIMAL_JOB

from samsa.deploy import spark as spark_module
from samsa.deploy import spark_supervisor
from samsa.deploy.exceptions import SparkMissingError
from samsa.deploy.restarts import RestartBudget
from samsa.deploy.spark import (
    TaskPlace,
    batch_attempts,
    batch_master,
    default_master,
    require_pyspark,
    spark_conf,
)
from samsa.deploy.spark_supervisor import driver_host
from samsa.runtime.config.config import Config, default_registry
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.job_model import ContainerModel, JobModel


def test_a_missing_spark_extra_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(spark_module, "_IMPORT_ERROR", ImportError("No module named 'pyspark'"))
    with pytest.raises(SparkMissingError) as info:
        require_pyspark()
    assert "pip install -e '.[spark]'" in str(info.value)
    assert "job.deploy=local" in str(info.value)


def test_the_default_master_has_a_slot_per_container_and_no_spark_retry():
    assert default_master(3) == "local[3,1]"


def test_the_default_master_takes_the_jobs_max_failures_which_local_mode_reads_only_there(monkeypatch):
    # CONFIG.md: deploy.spark.master defaults to local[<containers>,<maxFailures>].
    assert "local[<containers>,<maxFailures>]" in default_registry().render()  # `samsa config keys`
    assert JobConfig(Config(MINIMAL_JOB)).spark_max_failures == 1
    job = JobConfig(Config({**MINIMAL_JOB, "deploy.spark.conf.spark.task.maxFailures": "4"}))
    assert job.spark_max_failures == 4
    assert default_master(2, job.spark_max_failures) == "local[2,4]"
    masters = []

    class Started(Exception):
        pass

    def spark(app_name, master, conf):
        masters.append(master)
        raise Started

    monkeypatch.setattr(spark_supervisor, "Spark", spark)
    monkeypatch.setattr(spark_supervisor, "JobCoordinator", lambda job: _Prepared(containers=2))
    with pytest.raises(Started):
        spark_supervisor.SparkSupervisor(job, True).run()
    assert masters == ["local[2,4]"]


class _Prepared:
    def __init__(self, containers):
        self.containers = containers

    def prepare(self):
        return JobModel("test", tuple(ContainerModel(str(i), ()) for i in range(self.containers)))


@pytest.mark.parametrize("value", ["0", "-1", "many", "1.5"])
def test_a_max_failures_that_is_no_whole_number_of_at_least_one_is_refused(value):
    with pytest.raises(ConfigError, match=rf"deploy\.spark\.conf\.spark\.task\.maxFailures='{value}'"):
        JobConfig(Config({**MINIMAL_JOB, "deploy.spark.conf.spark.task.maxFailures": value}))


def test_spark_conf_quiets_spark_and_turns_its_retry_off_unless_the_job_says_otherwise():
    conf = spark_conf(JobConfig(Config(MINIMAL_JOB)))
    assert conf["spark.task.maxFailures"] == "1"
    assert "log4j2-quiet.properties" in conf["spark.driver.extraJavaOptions"]
    assert spark_module.QUIET_LOG4J.is_file()
    job = JobConfig(
        Config(
            {
                **MINIMAL_JOB,
                "deploy.spark.conf.spark.task.maxFailures": "4",
                "deploy.spark.conf.spark.log.level": "INFO",
                "deploy.spark.conf.spark.executor.memory": "2g",
            }
        )
    )
    conf = spark_conf(job)
    assert conf["spark.task.maxFailures"] == "4"
    assert conf["spark.executor.memory"] == "2g"
    assert "spark.driver.extraJavaOptions" not in conf  # Spark's log asked for: its own config


def test_spark_keys_have_samzas_defaults_and_are_checked():
    job = JobConfig(Config({**MINIMAL_JOB, "job.deploy": "spark"}))
    assert (job.deploy, job.spark_master, job.spark_max_restarts, job.heartbeat_timeout_ms) == (
        "spark",
        None,
        10,
        30000,
    )
    with pytest.raises(Exception, match=r"deploy\.spark\.heartbeat\.timeout\.ms"):
        Config({**MINIMAL_JOB, "deploy.spark.heartbeat.timeout.ms": "10"}).value(
            "deploy.spark.heartbeat.timeout.ms"
        )


def test_the_docs_give_the_checkpoint_transactional_id_the_code_uses():
    from samsa.runtime.takeover import checkpoint_producer_config

    job = JobConfig(Config({**MINIMAL_JOB, "job.name": "wc", "job.id": "7"}))
    assert checkpoint_producer_config(job, "3")["transactional.id"] == "samsa-checkpoint-wc-7-container-3"
    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in ("spark.md", "running.md"):
        ids = set(re.findall(r"samsa-checkpoint-[^`]*", (docs / page).read_text()))
        assert ids == {"samsa-checkpoint-<job>-<id>-container-<n>"}, page


def test_the_control_server_binds_where_executors_reach_the_driver():
    assert driver_host({}, "local[2,1]") == "127.0.0.1"
    assert driver_host({"spark.driver.host": "10.1.2.3"}, "spark://m:7077") == "10.1.2.3"


def test_a_task_place_names_one_executor():
    assert TaskPlace("3", "10.0.0.7").location == "executor_10.0.0.7_3"


def test_the_restart_budget_backs_off_and_runs_out_within_its_window():
    budget = RestartBudget(3, window_s=600)
    assert [budget.next_delay(t) for t in (0, 1, 2)] == [0.5, 1.0, 2.0]
    assert budget.next_delay(3) is None
    assert budget.recent(3) == 3
    # Ten minutes later the old crashes no longer count.
    assert budget.next_delay(700) == 0.5
    assert RestartBudget(0).next_delay(0) is None


def test_a_batch_job_on_local_spark_gets_its_task_attempts_through_the_master():
    # Local mode ignores spark.task.maxFailures: only the master's second number retries a failed task.
    assert batch_master(JobConfig(Config(MINIMAL_JOB))) == "local[*,4]"
    retries = {**MINIMAL_JOB, "deploy.spark.conf.spark.task.maxFailures": "2"}
    assert batch_master(JobConfig(Config(retries))) == "local[*,2]"
    assert batch_attempts(JobConfig(Config(retries))) == 2
    cluster = {**retries, "deploy.spark.master": "spark://head:7077"}
    assert batch_master(JobConfig(Config(cluster))) == "spark://head:7077"
