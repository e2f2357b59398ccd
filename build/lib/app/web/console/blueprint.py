"""The console blueprint, apart from the package so its view modules can import it."""

from flask import Blueprint

bp = Blueprint("console", __name__)
