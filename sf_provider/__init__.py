"""sf-provider: Claude, through the Claude Agent SDK and its bundled Claude Code CLI, as a drop-in
model provider that really calls your application's function tools.

Start with `ClaudeAgentProvider` and `FunctionTool`; test offline with `sf_provider.testing`.
"""

from .errors import (
    APIError,
    AuthenticationError,
    CLINotFoundError,
    DuplicateToolNameError,
    EmptyToolRoutingError,
    InvalidMessagesError,
    InvalidToolNameError,
    InvalidToolSchemaError,
    MaxTurnsError,
    MissingExecutorError,
    OverloadedError,
    ProcessDiedError,
    ProviderError,
    RateLimitError,
    ToolChoiceViolationError,
    ToolDefinitionError,
    ToolRoutingError,
    UnsupportedRequestError,
)
from .provider import CallOptions, ClaudeAgentProvider, NamedToolChoice, ToolChoice
from .settings import ProviderSettings
from .tools import Executor, FunctionTool, ToolOutput, normalize_input_schema
from .types import (
    CallWarning,
    ErrorPart,
    FinishPart,
    FinishReason,
    GenerateResult,
    Mode,
    ReasoningDeltaPart,
    ReasoningEndPart,
    ReasoningStartPart,
    StreamPart,
    StreamStartPart,
    TextDeltaPart,
    TextEndPart,
    TextStartPart,
    ToolCallPart,
    ToolCallRecord,
    ToolInputDeltaPart,
    ToolInputEndPart,
    ToolInputStartPart,
    ToolResultPart,
    Usage,
)

__version__ = "0.1.0"

__all__ = [
    "APIError",
    "AuthenticationError",
    "CLINotFoundError",
    "CallOptions",
    "CallWarning",
    "ClaudeAgentProvider",
    "DuplicateToolNameError",
    "EmptyToolRoutingError",
    "ErrorPart",
    "Executor",
    "FinishPart",
    "FinishReason",
    "FunctionTool",
    "GenerateResult",
    "InvalidMessagesError",
    "InvalidToolNameError",
    "InvalidToolSchemaError",
    "MaxTurnsError",
    "MissingExecutorError",
    "Mode",
    "NamedToolChoice",
    "OverloadedError",
    "ProcessDiedError",
    "ProviderError",
    "ProviderSettings",
    "RateLimitError",
    "ReasoningDeltaPart",
    "ReasoningEndPart",
    "ReasoningStartPart",
    "StreamPart",
    "StreamStartPart",
    "TextDeltaPart",
    "TextEndPart",
    "TextStartPart",
    "ToolCallPart",
    "ToolCallRecord",
    "ToolChoice",
    "ToolChoiceViolationError",
    "ToolDefinitionError",
    "ToolInputDeltaPart",
    "ToolInputEndPart",
    "ToolInputStartPart",
    "ToolOutput",
    "ToolResultPart",
    "ToolRoutingError",
    "UnsupportedRequestError",
    "Usage",
    "__version__",
    "normalize_input_schema",
]

import logging as _logging

# A library logs; the application decides where records go.
_logging.getLogger("sf_provider").addHandler(_logging.NullHandler())
