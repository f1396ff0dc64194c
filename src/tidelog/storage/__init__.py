"""tidelog.storage"""
