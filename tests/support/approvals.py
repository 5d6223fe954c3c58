"""The weather role the approval tests share: a forecast tool gated by an approval, and a handler that counts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agl_notebook import Role, ToolResult, describe, reporting_tool, tool
from agl_notebook.payloads import JsonObject


@dataclass(frozen=True)
class Address:
    city: str = describe("The city.")
    zip: str = describe("The postal code.", default="")


@dataclass(frozen=True)
class Forecast:
    place: Address = describe("Where.")
    days: int = describe("How many days ahead, 1 to 7.")
    units: list[str] = describe("Units to report in.", default=[])

    def __post_init__(self) -> None:
        if not 1 <= self.days <= 7:
            raise ValueError("days: must be from 1 to 7.")


@dataclass(frozen=True)
class Summary:
    text: str = describe("What was found.")


class Weather:
    """The tool's handler, keeping every payload it was called with."""

    def __init__(self) -> None:
        self.calls: list[Forecast] = []

    async def __call__(self, forecast: Forecast) -> ToolResult:
        self.calls.append(forecast)
        return ToolResult(f"{forecast.place.city}: sunny for {forecast.days} days")


ASKED: JsonObject = {"place": {"city": "Oslo"}, "days": 3}


def weather_role(handler: Weather, approval: Any = "ask") -> Role[Summary]:
    return Role(
        name="forecaster",
        instructions="Forecast.",
        tools=[
            tool("weather", "Get the forecast.", Forecast, handler, approval=approval),
            reporting_tool("report", "Report.", Summary),
        ],
    )
