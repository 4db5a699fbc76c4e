"""The guard's OS layer: the policy's ``protect:`` section compiled into a sandbox.

* the host's own sandbox, written by ``hook install --sandbox`` (Claude
  Code's ``sandbox`` settings; what Codex and Gemini CLI can express);
* ``run --sandbox``: the agent's process tree under bubblewrap, secrets
  hidden, the guard's files read-only, the network through a local proxy
  that lets only the allowed domains through.

docs/guard-layers.md says what each layer stops.
"""

__all__: tuple[str, ...] = ()
