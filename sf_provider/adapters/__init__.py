"""Drop-in adapters for agent frameworks: `sf_provider.adapters.pydantic_ai` and
`sf_provider.adapters.langchain`. Each is imported on its own, so `import sf_provider` never
imports a framework; a missing extra raises an `ImportError` naming the extra to install.
"""
