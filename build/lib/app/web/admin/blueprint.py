"""The admin blueprint, apart from the package so its view modules can import it."""

from flask import Blueprint

bp = Blueprint("admin", __name__)
