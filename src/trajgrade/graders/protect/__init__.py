"""The ``protect`` grader: the policy's ``protect:`` section, judged on every call.

* :mod:`.config` -- the section as written (:class:`ProtectConfig`);
* :mod:`.facts` -- what a call does (:class:`CallFacts`), and the
  :class:`World` a guard mode resolves paths in;
* :mod:`.analysis` -- a ToolCall -> CallFacts (shell words, views of every
  tool kind, capabilities of programs, the file system when there is one);
* :mod:`.programs` -- shipped data: what each known program can do;
* :mod:`.grader` -- the posture, the built-in self-protection, provenance of
  agent-written files, secret values by digest.

docs/guard-layers.md says what this layer stops and what only the sandbox does.
"""

__all__: tuple[str, ...] = ()
