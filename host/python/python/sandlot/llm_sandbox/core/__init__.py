"""llm-sandbox's ``core`` package: ``core.session_base.BaseSession``."""
