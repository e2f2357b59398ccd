"""The auth blueprint, apart from the package so its view modules can import it."""

from flask import Blueprint

bp = Blueprint("auth", __name__)
