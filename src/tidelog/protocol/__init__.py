"""tidelog.protocol"""
