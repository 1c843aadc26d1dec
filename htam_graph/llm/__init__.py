"""LLM backends behind one interface (base.LLMClient): Anthropic's Messages API, any
OpenAI-compatible endpoint, and scripted responses for reproducing a run.

Dependencies point one way: request (Prompt.context, what a backend that reads the state
rather than the text is given) <- base (the interface and records) <- retry, prices, settings
<- family (the request's parameters per model family) <- api (what the HTTP backends
share) <- anthropic_client, openai_client; script needs only base;
htam_graph.loop.clients picks one from LLMSettings.

Nothing is imported here: htam_graph.config nests llm.settings, and every process that
reads settings (GPU workers included, where the provider SDKs are not installed) must not
pay for, or need, the SDKs. Import from the submodules.
"""
