"""TOMC as a hook of a LiteLLM proxy: ``litellm_settings: callbacks: tomc.litellm.hook``.

A stock ``litellm --config config.yaml`` proxy with this line compacts the requests it serves on
its Chat Completions, Anthropic Messages and Responses routes, with the gateway's sessions,
targets, memory blocks and fail-open rule (an error in the hook never fails a request). Install
it from a clone into the proxy's environment: ``pip install -e '/path/to/tomc[litellm]'`` (no
package index serves ``tomc``). Settings come from the
environment (:class:`~tomc._litellm.compaction.HookSettings`: ``TOMC_SESSION_STORE``,
``TOMC_CONTEXT_TARGET``, ...) and, per key or team, from LiteLLM's key or team metadata
(``{"tomc": {"context_target": 60000}}`` or ``"off"``). For other settings, make your own
instance in a file beside the config: ``hook = TomcHook(HookSettings(...))``.
"""

from __future__ import annotations

import logging
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

from ._litellm.compaction import HookSettings, LiteLLMCompactor

__all__ = ["HookSettings", "TomcHook", "hook"]

logger = logging.getLogger("tomc.litellm")


def _status_of(error: object) -> int:
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) and status >= 400 else 500


class TomcHook(CustomLogger):
    """LiteLLM's hook calls, handed to a :class:`~tomc._litellm.compaction.LiteLLMCompactor`."""

    def __init__(self, settings: HookSettings | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.compactor = LiteLLMCompactor(settings)

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any
    ) -> dict:
        try:
            await self.compactor.prepare(
                data,
                str(call_type),
                getattr(user_api_key_dict, "metadata", None),
                getattr(user_api_key_dict, "team_metadata", None),
            )
        except Exception:  # prepare never raises; this is the last line of defence
            logger.exception("TOMC hook failed; the request goes out unchanged")
        return data

    async def async_log_success_event(
        self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        await self.compactor.finish(kwargs.get("litellm_call_id"), response_obj, 200)

    async def async_log_failure_event(
        self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        status = _status_of(kwargs.get("exception"))
        await self.compactor.finish(kwargs.get("litellm_call_id"), None, status)


#: The instance ``callbacks: tomc.litellm.hook`` names (settings from the environment).
hook = TomcHook()
