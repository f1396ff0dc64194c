"""tidelog.records"""
