"""Budgets estimate an image's and a PDF's tokens before a request (issue 28, item 5): by Anthropic's formula
(width * height / 750 after the API's scaling) and by pages, never by their base64 text."""

from __future__ import annotations

import math

import pytest

from agl_notebook import Document, Image, Run
from agl_notebook.errors import BudgetExceededError
from agl_notebook.media import IMAGE_MAX_TOKENS, TOKENS_PER_PDF_PAGE
from agl_notebook.models.anthropic import AnthropicModel
from agl_notebook.models.base import ModelRequest
from agl_notebook.models.prices import PRICES
from agl_notebook.run._meter import estimate, media_tokens
from agl_notebook.run._step import input_first_message
from tests.media.test_media_requests import Inspection, inspector
from tests.support.anthropic_api import api
from tests.support.media import jpeg_header, pdf, png, png_header


def test_an_image_costs_width_times_height_over_750_after_the_apis_scaling() -> None:
    assert Image(jpeg_header(1000, 600)).estimated_tokens == math.ceil(1000 * 600 / 750)  # 800, not scaled
    assert Image(png_header(3136, 1000)).estimated_tokens == math.ceil(1568 * 500 / 750)  # long edge scaled to 1568
    assert Image(png_header(1500, 1500)).estimated_tokens == IMAGE_MAX_TOKENS  # over ~1600 tokens: scaled to it
    assert Document(pdf(3)).estimated_tokens == 3 * TOKENS_PER_PDF_PAGE
    assert Document(b"abcdefgh", media_type="text/plain").estimated_tokens == 2


def test_a_requests_estimate_counts_the_image_by_its_pixels_not_its_base64() -> None:
    photo = Image(png(300, 200, noisy=True))  # about 180 KB, 240 KB of base64 text
    message = input_first_message(Inspection(photo, Document(pdf(2)), "x"))
    assert media_tokens([message]) == 80 + 2 * TOKENS_PER_PDF_PAGE
    rates = PRICES.rates_for("claude-haiku-4-5")
    assert rates is not None
    request = ModelRequest("claude-haiku-4-5", "Inspect.", (message,), (), 100)
    likely_tokens = estimate(request, rates).likely * 1_000_000 / max(rates.input, rates.cache_write_5m)
    assert likely_tokens < 10_000 < len(photo.base64) / 4  # the base64's length would have counted 60,000


async def test_a_budget_refuses_a_step_whose_pdf_would_pass_it_before_any_request() -> None:
    fake = api()
    run = Run(model=AnthropicModel(client=fake.client()), budget_usd=0.05)
    # 90 pages of 3,000 tokens each at Haiku's cache-write rate: about $0.34, over the $0.05 budget.
    with pytest.raises(BudgetExceededError):
        await run.step(inspector(), Inspection(Image(png()), Document(pdf(90)), "x"))
    assert fake.requests == []
