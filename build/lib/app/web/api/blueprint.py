"""The api blueprint, apart from the package so its view modules can import it."""

from flask import Blueprint

bp = Blueprint("api", __name__)
