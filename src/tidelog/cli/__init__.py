"""tidelog.cli"""
