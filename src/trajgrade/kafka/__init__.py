"""Grade a Kafka topic: a consumer group, per-partition engines, state in a
compacted changelog topic, verdicts to stdout or a topic.

Reading map:

* ``options.py``      the CLI options and the client (security) settings
* ``changelog.py``    the state envelope and restoring a partition's state
* ``partition.py``    one assigned partition: decoder, engine, replay guard
* ``sink.py``         verdicts to a topic (keyed by trace id, id in a header)
* ``repartition.py``  the opt-in re-keying stage (``--repartition``)
* ``runner.py``       the loop: poll, grade, flush, checkpoint, commit

Only ``options`` is imported by the CLI when Kafka is not used; the other
modules import aiokafka and are loaded only for a Kafka run.
"""

from __future__ import annotations

__all__ = ()
