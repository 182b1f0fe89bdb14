"""The .tc grammar (grammar/tensorc.lark), shipped as package data of tensorc.grammar."""
