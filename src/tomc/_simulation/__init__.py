"""The prompt-cache cost simulator behind ``tomc simulate``: replayable conversations (agent
sessions with tool calls, LoCoMo chats) sent through ``AutomaticChatSession`` under each policy
and priced as the providers bill cached input. Not part of the library a caller's loop uses."""
