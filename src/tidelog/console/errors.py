"""The console's errors: each carries the HTTP status the API answers with and a sentence for
the user. Cluster failures (confluent-kafka's errors, timeouts) are translated here."""

from __future__ import annotations

from concurrent.futures import Future
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

T = TypeVar("T")


class ConsoleError(Exception):
    status = 500

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class BadRequest(ConsoleError):
    status = 400


class NotFound(ConsoleError):
    status = 404


class Conflict(ConsoleError):
    status = 409


class Forbidden(ConsoleError):
    """The cluster's ACLs refused the signed-in user."""

    status = 403


class Unauthenticated(ConsoleError):
    status = 401


AUTHORIZATION_CODES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}
# `doing` is a gerund phrase ("creating topic 'x'"); a refusal reads "You are not allowed to
# create topic 'x' (TOPIC_AUTHORIZATION_FAILED)".
_INFINITIVES = {"reading": "read", "listing": "list", "describing": "describe",
                "creating": "create", "deleting": "delete", "altering": "alter",
                "fetching": "fetch", "resetting": "reset", "producing": "produce to",
                "aborting": "abort", "rotating": "rotate"}


def not_allowed(doing: str, code_name: str) -> Forbidden:
    verb, _, rest = doing.partition(" ")
    infinitive = _INFINITIVES.get(verb)
    if infinitive is not None:
        if infinitive.endswith(" to") and rest.startswith("to "):
            rest = rest[3:]
        return Forbidden(f"You are not allowed to {infinitive} {rest} ({code_name})")
    return Forbidden(f"You are not allowed to do this: {doing} ({code_name})")


class ClusterError(ConsoleError):
    """The cluster refused or could not be reached (503 when unreachable, 502 when it refused)."""

    status = 502


def describe_error(error: BaseException, doing: str) -> ConsoleError:
    kafka_error = error.args[0] if isinstance(error, KafkaException) and error.args else None
    if isinstance(kafka_error, KafkaError):
        code = kafka_error.code()
        words = kafka_error.str() or kafka_error.name()
        if code in AUTHORIZATION_CODES:
            return not_allowed(doing, kafka_error.name())
        if code in (KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION):
            return Unauthenticated(f"{doing}: the cluster refused your credentials ({words}); "
                                   f"sign in again")
        if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
                    KafkaError._UNKNOWN_PARTITION, KafkaError.GROUP_ID_NOT_FOUND):
            return NotFound(f"{doing}: {words}")
        if code in (KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.NON_EMPTY_GROUP):
            return Conflict(f"{doing}: {words}")
        if code in (KafkaError.INVALID_PARTITIONS, KafkaError.INVALID_REPLICATION_FACTOR,
                    KafkaError.INVALID_CONFIG, KafkaError.TOPIC_EXCEPTION,
                    KafkaError.INVALID_REQUEST, KafkaError.POLICY_VIOLATION,
                    KafkaError._INVALID_ARG):
            return BadRequest(f"{doing}: {words}")
        if code in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                    KafkaError.REQUEST_TIMED_OUT, KafkaError._RESOLVE):
            return ClusterError(f"{doing}: the cluster did not answer ({words})", 503)
        return ClusterError(f"{doing}: {words}")
    if isinstance(error, TimeoutError) or type(error).__name__ == "TimeoutError":
        return ClusterError(f"{doing}: the cluster did not answer in time", 503)
    if isinstance(error, ValueError | TypeError):
        return BadRequest(f"{doing}: {error}")
    return ClusterError(f"{doing}: {error}")


def wait_for(future: Future[T], doing: str, timeout: float) -> T:
    try:
        return future.result(timeout)
    except ConsoleError:
        raise
    except Exception as error:
        raise describe_error(error, doing) from None
