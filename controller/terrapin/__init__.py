"""Terrapin's controller: admission control, the in-band reservation protocol and the REST API
over P4Runtime, run as one asyncio process (main.py). docs/controller.md opens with the path a
request takes through these modules; its layout section says what each one owns."""
