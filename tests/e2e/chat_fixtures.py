"""What the chat-API tests share: the chat templates' folder and a weather tool's argument schema."""

from pathlib import Path

CHAT_TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "chat_templates"

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                  "required": ["city"], "additionalProperties": False}
